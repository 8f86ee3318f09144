"""Services: every state change goes through one of these modules."""
