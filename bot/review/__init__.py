"""The review page: maintainers sign in with GitHub and confirm, correct or reject what the bot did."""
