-- Run once by the pgvector image's entrypoint (docker-compose.yml) in the
-- redstring database, as the local stack does on `redstring dev up`.
CREATE EXTENSION IF NOT EXISTS vector;
