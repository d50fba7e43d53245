# vLLM generation server (Vault role docquery-vllm): reads its own API key,
# nothing else. The embed server has its own role and subtree (vllm-embed.hcl).
path "secret/data/docquery/vllm/*" {
  capabilities = ["read"]
}

path "auth/token/renew-self" {
  capabilities = ["update"]
}

path "auth/token/lookup-self" {
  capabilities = ["read"]
}
