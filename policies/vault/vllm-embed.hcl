# vLLM embedding server (Vault role docquery-vllm-embed): reads its own API key,
# nothing else. Threat: a compromised embed server must not get the generation
# server's key (and so the right to call it as the query service does).
path "secret/data/docquery/vllm-embed/*" {
  capabilities = ["read"]
}

path "auth/token/renew-self" {
  capabilities = ["update"]
}

path "auth/token/lookup-self" {
  capabilities = ["read"]
}
