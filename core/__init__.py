"""Issue Sorter's shared core: what the GitHub App (`bot`) and training (`trainer`) both build on.

Settings, the database and its tables, queries, the migrations runner, the text a model reads, the four
kinds, the model card, inference, and the job contract between the processes. It imports neither
application (a test holds it to that).
"""
