"""House players: the seats the house plays itself (the Matgo AI). They think out of the event
loop; their moves are journaled like any player's."""
