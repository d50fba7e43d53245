# DocQuery upload API (Vault role docquery-upload). Least privilege:
# read its own KV secrets; nothing else.
# Threat: the only serving pod that may write the index. A compromised upload pod
# must not read other workloads' secrets or touch sys/; no Transit grant.

# Its own secrets: qdrant-api-key (read-write), api-keys, jwks, ui-session-keys,
# and with the components embedder-api-key and ui-oidc-client-secret.
# KV v2 needs the data/ prefix; no list on metadata (names are not enumerable).
path "secret/data/docquery/upload/*" {
  capabilities = ["read"]
}

# Keep its own token alive. Listed here so roles can set
# token_no_default_policy=true and this file is the whole grant.
path "auth/token/renew-self" {
  capabilities = ["update"]
}

path "auth/token/lookup-self" {
  capabilities = ["read"]
}
