"""Everything that runs on Ray: the driver, session actors, role pools and limiters."""
