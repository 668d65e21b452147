"""`cltune deploy`: tuned settings leave cltune as a C header and a JSON tuning file (docs/deploy.md)."""
