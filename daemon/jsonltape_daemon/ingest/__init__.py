"""From session files to index rows, the same for both engines."""
