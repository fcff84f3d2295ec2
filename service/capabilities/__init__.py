"""Host handlers for guest requests, one module per concern; each registers its methods with the dispatcher."""
