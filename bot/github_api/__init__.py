"""The GitHub adapter: PyGithub calls sorted into retry or drop, issue snapshots, the Redis cache, write spacing, the manifest."""
