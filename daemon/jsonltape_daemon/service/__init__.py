"""The daemon: the watch loop, the push to a team index, its lock and status."""
