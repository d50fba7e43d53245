# Opt-in, NOT attached by the bundle: add it to role docquery-ingest only where
# ingest runs with encryption at rest (DOCQUERY_ENCRYPTION__ENABLED=true) and
# logs in to Vault itself. The bundle ships encryption off, so its roles carry
# no Transit grant at all (least privilege).

# Generate a data key: Transit returns it both plain (used in memory to encrypt
# chunks with AES-GCM) and wrapped (stored with the collection). "plaintext",
# not "wrapped": the wrapped-only variant would force ingest to unwrap through
# transit/decrypt, i.e. grant it the decrypt capability this policy withholds.
# Ingest therefore can never unwrap an existing key: it makes a fresh data key
# per run, which also moves new chunks onto the newest Transit key version.
path "transit/datakey/plaintext/docquery" {
  capabilities = ["update"]
}
