"""The paper rows' public data: what exists (catalogue), fetching it (fetch), making what recipes read (build)."""
