# Opt-in, NOT attached by the bundle: add it to role docquery-query only where
# the query service runs with encryption at rest and logs in to Vault itself.

# Unwrap the collection's data keys to decrypt retrieved chunks. Decrypt only:
# no encrypt, no datakey, no rewrap, no key read or rotation.
path "transit/decrypt/docquery" {
  capabilities = ["update"]
}
