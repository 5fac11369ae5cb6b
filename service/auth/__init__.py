"""Authentication: a bearer token (OIDC JWT or API key) becomes a principal; the owner is
whose memory a request addresses."""
