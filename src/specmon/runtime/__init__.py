"""The hub: runs sources as tasks on its own asyncio loop in a background thread and fans their
events out to the session state, the recorder and the UI."""
