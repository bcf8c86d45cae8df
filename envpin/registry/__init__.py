"""Talking to OCI registries: the client (manifests, configs, digests, redirects, token auth) and the
logins it may use (Docker's config.json and credential helpers)."""
