# vLLM server (Vault role docquery-vllm): reads its own API key, nothing else.
path "secret/data/docquery/vllm/*" {
  capabilities = ["read"]
}

path "auth/token/renew-self" {
  capabilities = ["update"]
}

path "auth/token/lookup-self" {
  capabilities = ["read"]
}
