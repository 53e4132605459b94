"""Webhook intake: verify a delivery, parse it into a typed event, queue its job once, answer; the redelivery sweep."""
