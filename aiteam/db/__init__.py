"""Database plumbing below the ORM: the PostgreSQL backend that pipelines deferred writes (write_behind)."""
