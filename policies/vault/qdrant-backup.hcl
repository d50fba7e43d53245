# DocQuery Qdrant backup CronJob (Vault role docquery-qdrant-backup). Least
# privilege: its own KV secret (the read-write Qdrant key snapshot creation needs).

path "secret/data/docquery/qdrant-backup/*" {
  capabilities = ["read"]
}

path "auth/token/renew-self" {
  capabilities = ["update"]
}

path "auth/token/lookup-self" {
  capabilities = ["read"]
}
