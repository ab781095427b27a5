{# The log and the dimension on a Citus coordinator: distributed by the key and
   colocated, so that every statement joining them with each other or with the load's
   session tables (distributed alike, see src/db/citus/mod.rs) runs on the shards. A
   distributed table's primary key must include its distribution column. A key of
   several columns is distributed by its hash (`keys[0]` is then dimlog_key_hash, see
   src/context.rs), which rows bring from the working tables they came through. #}
-- statement: log
CREATE TABLE IF NOT EXISTS {{ log }} (
    log_id     bigint NOT NULL,
    {{ sk }} bigint,
{% if key_hash %}
    {{ keys[0] }} bigint NOT NULL,
{% endif %}
{% for c in key_defs %}
    {{ c.name }} {{ c.target_type }} NOT NULL,
{% endfor %}
{% for c in attr_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
    valid_from timestamptz NOT NULL,
    is_deleted boolean     NOT NULL,
    row_hash   bytea,
    load_id    bigint      NOT NULL,
    loaded_at  timestamptz NOT NULL,
    PRIMARY KEY (log_id, {{ keys[0] }})
)
-- statement: distribute_log
SELECT create_distributed_table({{ log|lit }}, {{ keys[0]|bare|lit }})
-- statement: dimension
CREATE TABLE IF NOT EXISTS {{ dim }} (
    {{ sk }} bigint NOT NULL,
{% if key_hash %}
    {{ keys[0] }} bigint NOT NULL,
{% endif %}
{% for c in key_defs %}
    {{ c.name }} {{ c.target_type }} NOT NULL,
{% endfor %}
{% for c in attr_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
{% for c in current_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz NOT NULL,
    is_current boolean     NOT NULL,
    row_hash   bytea       NOT NULL,
    load_id    bigint      NOT NULL,
    CONSTRAINT {{ dim_pk }} PRIMARY KEY ({{ sk }}, {{ keys[0] }})
) WITH (fillfactor = 90)
-- statement: distribute_dimension
SELECT create_distributed_table({{ dim|lit }}, {{ keys[0]|bare|lit }}, colocate_with => {{ log|lit }})
{# `dimlog distribute` of a key of several columns: the key's hash in both tables, filled
   from their rows ($hash is the expression the load's working tables compute it with),
   and dimlog's key indexes dropped, to be made again with it. #}
-- statement: add_key_hash
{% for t in [log, dim] %}
ALTER TABLE {{ t }} ADD COLUMN {{ column }} bigint;
UPDATE {{ t }} SET {{ column }} = {{ hash }};
ALTER TABLE {{ t }} ALTER COLUMN {{ column }} SET NOT NULL;
{% endfor %}
DROP INDEX IF EXISTS {{ indexes|join(", ") }}
-- statement: add_primary_key
ALTER TABLE {{ table }} ADD CONSTRAINT {{ name }} PRIMARY KEY ({{ column }}, {{ keys[0] }})
{# Whole tables: Citus passes an ANALYZE on to the shards, and its column list unquoted
   (a column named like a keyword breaks it). #}
-- statement: analyze_log
ANALYZE {{ log }}
-- statement: analyze_dimension
ANALYZE {{ dim }}
{# `dimlog distribute`: whether the log ($1) and the dimension ($2) are distributed. #}
-- statement: distributed_tables
SELECT (SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = to_regclass($1))::text,
       (SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = to_regclass($2))::text
-- statement: shard_count
SELECT count(*)::text FROM pg_dist_shard WHERE logicalrelid = to_regclass($1)
