"""The screens: ``dealer web`` serves the dealer-station and pit-boss pages (``docs/screens.md``)."""
