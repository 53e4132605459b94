"""The `issue-sorter` command: the service supervisor and every operator command, in one tree."""
