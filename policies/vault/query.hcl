# DocQuery query service (Vault role docquery-query). Least privilege:
# read its own KV secrets and unwrap data keys; nothing else.
# Threat: a compromised query pod must not read other workloads' secrets,
# create data keys (it never encrypts) or touch sys/.

# Its own secrets: llm-api-key, qdrant-read-only-key, api-keys, jwks.
# KV v2 needs the data/ prefix; no list on metadata (names are not enumerable).
path "secret/data/docquery/query/*" {
  capabilities = ["read"]
}

# Unwrap the collection's data keys to decrypt retrieved chunks. Decrypt only:
# no encrypt, no datakey, no rewrap, no key read or rotation.
path "transit/decrypt/docquery" {
  capabilities = ["update"]
}

# Keep its own token alive (VaultSession renews before expiry). Listed here so
# roles can set token_no_default_policy=true and this file is the whole grant.
path "auth/token/renew-self" {
  capabilities = ["update"]
}

path "auth/token/lookup-self" {
  capabilities = ["read"]
}
