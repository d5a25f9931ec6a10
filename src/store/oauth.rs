//! OAuth clients, consents, authorization codes, refresh-token families and tokens.
