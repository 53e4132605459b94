"""Issue Sorter's GitHub App: webhook receiver, labelling and feedback workers, and the GitHub client."""
