"""Issue Sorter's GitHub App: webhook receiver, queue, worker and the data they keep."""
