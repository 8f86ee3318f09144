"""The review inbox in the Django admin: list filters, forms, the review page's sections and its views.

Views are thin: read the form, call one service (the same ones the API and the sweeper
call), report the outcome as an admin message. Nothing here changes a state by itself.
"""
