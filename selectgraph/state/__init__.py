"""State: how a run's state is shaped and changed — schemas, reducers, views, merges."""
