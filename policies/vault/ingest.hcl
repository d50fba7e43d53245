# DocQuery ingest Job (Vault role docquery-ingest). Least privilege:
# read its own KV secrets and generate data keys; nothing else.
# Threat: a compromised ingest pod must not decrypt stored chunks or read
# the query service's secrets.

# Its own secrets: qdrant-api-key (read-write), embedder-api-key.
path "secret/data/docquery/ingest/*" {
  capabilities = ["read"]
}

# Generate a data key: Transit returns it both plain (used in memory to encrypt
# chunks with AES-GCM) and wrapped (stored with the collection). "plaintext",
# not "wrapped": the wrapped-only variant would force ingest to unwrap through
# transit/decrypt, i.e. grant it the decrypt capability this policy withholds.
# Ingest therefore can never unwrap an existing key: it makes a fresh data key
# per run, which also moves new chunks onto the newest Transit key version.
path "transit/datakey/plaintext/docquery" {
  capabilities = ["update"]
}

path "auth/token/renew-self" {
  capabilities = ["update"]
}

path "auth/token/lookup-self" {
  capabilities = ["read"]
}
