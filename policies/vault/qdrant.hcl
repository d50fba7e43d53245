# Qdrant (Vault role docquery-qdrant): reads its config (api_key,
# read_only_api_key, alt_api_key for rolling rotation), nothing else.
path "secret/data/docquery/qdrant/*" {
  capabilities = ["read"]
}

path "auth/token/renew-self" {
  capabilities = ["update"]
}

path "auth/token/lookup-self" {
  capabilities = ["read"]
}
