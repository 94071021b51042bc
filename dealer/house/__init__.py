"""House players: the seats the house plays itself (the Matgo AI). A hand with a house seat
(:class:`~dealer.core.game_contract.HouseSeat`) describes each decision as a picklable request;
:mod:`dealer.house.registry` finds the :class:`~dealer.house.player.HousePlayer` for it, which
answers with a :class:`~dealer.house.player.HouseMove`. They think out of the event loop (in a
process pool, :mod:`dealer.edge.house`); their moves are journaled like any player's."""
