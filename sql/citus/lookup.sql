{# assign-keys on Citus. A fact table distributed by the key and colocated with the
   dimension is assigned in one UPDATE that Citus runs on the shards (a correlated lookup
   on the distribution column). A local fact table is joined with the distributed
   dimension first, into a map on the coordinator by row (`ctid`, which Citus does not
   let a statement that also reads a distributed table use), then updated from the map. #}
{% macro lookup(x) %}(SELECT dimlog_d.{{ sk }} FROM {{ dim }} dimlog_d
     WHERE {% for k in fact_keys %}dimlog_d.{{ key_names[loop.index0] }} = {{ x }}.{{ k }} AND {% endfor %}dimlog_d.valid_from <= {{ at(x ~ "." ~ fact_at) }} AND {{ at(x ~ "." ~ fact_at) }} < dimlog_d.valid_to){% endmacro %}
{# 0: a local fact table; 1: distributed by the first key column and colocated with the
   dimension (assigned on the shards); 2: distributed otherwise (by another column, in
   another colocation group), which no statement here can update from the dimension;
   3: a reference table, which Citus updates from no table of the coordinator (refused). A dimension distributed by its key's hash (a key of several
   columns) has no fact table colocated by the key: any distributed one is 2. #}
-- statement: facts_distributed
SELECT CASE
    WHEN NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass($1)) THEN '0'
    WHEN EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass($1) AND partmethod = 'n'
                   AND repmodel = 't') THEN '3'
    WHEN {{ "false AND " if key_hash }}EXISTS (SELECT 1 FROM pg_dist_partition dimlog_f
                 JOIN pg_dist_partition dimlog_d ON dimlog_d.logicalrelid = to_regclass({{ dim|lit }})
                 WHERE dimlog_f.logicalrelid = to_regclass($1) AND dimlog_f.colocationid = dimlog_d.colocationid
                   AND dimlog_f.partkey IS NOT NULL
                   AND column_to_column_name(dimlog_f.logicalrelid, dimlog_f.partkey) = {{ fact_keys[0]|bare|lit }}) THEN '1'
    ELSE '2'
END
{# PostgreSQL's check, in steps Citus plans whatever the fact table's layout: the facts'
   values and the dimension's surrogate keys are gathered on the coordinator first (a
   join of the two on the surrogate key, which distributes neither, is none Citus runs). #}
-- statement: sk_foreign
WITH dimlog_v AS MATERIALIZED (
    SELECT {{ fact_sk }} AS dimlog_sk, count(*) AS dimlog_n FROM {{ facts }}
    WHERE {{ fact_sk }} IS NOT NULL AND {{ fact_sk }} <> -1 GROUP BY {{ fact_sk }}
), dimlog_k AS MATERIALIZED (
    SELECT DISTINCT {{ sk }} AS dimlog_sk FROM {{ dim }}
)
SELECT COALESCE(sum(dimlog_v.dimlog_n), 0)::text, min(dimlog_v.dimlog_sk)::text FROM dimlog_v
WHERE NOT EXISTS (SELECT 1 FROM dimlog_k WHERE dimlog_k.dimlog_sk = dimlog_v.dimlog_sk)
{# A fact table distributed otherwise (by another column, or not colocated, as any is
   with a key distributed by its hash): Citus joins it with the dimension by
   repartitioning both by the key, into a map on the coordinator of each key and time
   the facts hold to its surrogate key (an inner join: Citus repartitions no outer
   join), which the times no version covers join as -1; then the facts are updated from
   the map, which Citus sends to every shard. Keys and times match NULL to NULL there, so
   a fact with a NULL key or time finds its -1 in the map. #}
-- statement: assign_repartition
{% if facts_elsewhere %}
SET LOCAL citus.enable_repartition_joins = on
{% endif %}
-- statement: assign_map
{% if facts_elsewhere %}
CREATE TEMP TABLE dimlog_assign_map ON COMMIT DROP AS
SELECT DISTINCT {% for k in fact_keys %}dimlog_x.{{ k }} AS dimlog_k{{ loop.index }}, {% endfor %}dimlog_x.{{ fact_at }} AS dimlog_at, dimlog_d.{{ sk }} AS dimlog_sk
FROM {{ facts }} dimlog_x
JOIN {{ dim }} dimlog_d
  ON {% for k in fact_keys %}dimlog_d.{{ key_names[loop.index0] }} = dimlog_x.{{ k }} AND {% endfor %}dimlog_d.valid_from <= {{ at("dimlog_x." ~ fact_at) }} AND {{ at("dimlog_x." ~ fact_at) }} < dimlog_d.valid_to
{% elif not facts_distributed %}
CREATE TEMP TABLE dimlog_assign_map ON COMMIT DROP AS
SELECT dimlog_x.dimlog_rid, COALESCE(dimlog_d.{{ sk }}, -1) AS dimlog_sk
FROM (SELECT ctid::text AS dimlog_rid, * FROM {{ facts }} OFFSET 0) dimlog_x
LEFT JOIN {{ dim }} dimlog_d
  ON {% for k in fact_keys %}dimlog_d.{{ key_names[loop.index0] }} = dimlog_x.{{ k }} AND {% endfor %}dimlog_d.valid_from <= {{ at("dimlog_x." ~ fact_at) }} AND {{ at("dimlog_x." ~ fact_at) }} < dimlog_d.valid_to
{% endif %}
-- statement: assign_facts_seen
{% if facts_elsewhere %}
CREATE TEMP TABLE dimlog_assign_seen ON COMMIT DROP AS
SELECT DISTINCT {% for k in fact_keys %}{{ k }} AS dimlog_k{{ loop.index }}, {% endfor %}{{ fact_at }} AS dimlog_at FROM {{ facts }}
{% endif %}
-- statement: assign_unknown
{% if facts_elsewhere %}
INSERT INTO dimlog_assign_map
SELECT dimlog_s.*, -1 FROM dimlog_assign_seen dimlog_s
WHERE NOT EXISTS (SELECT 1 FROM dimlog_assign_map dimlog_m
                  WHERE {% for k in fact_keys %}dimlog_m.dimlog_k{{ loop.index }} IS NOT DISTINCT FROM dimlog_s.dimlog_k{{ loop.index }} AND {% endfor %}dimlog_m.dimlog_at IS NOT DISTINCT FROM dimlog_s.dimlog_at)
{% endif %}
-- statement: assign
{% if facts_elsewhere %}
UPDATE {{ facts }} dimlog_f
SET {{ fact_sk }} = dimlog_m.dimlog_sk
FROM dimlog_assign_map dimlog_m
WHERE {% for k in fact_keys %}dimlog_f.{{ k }} IS NOT DISTINCT FROM dimlog_m.dimlog_k{{ loop.index }} AND {% endfor %}dimlog_f.{{ fact_at }} IS NOT DISTINCT FROM dimlog_m.dimlog_at
  AND dimlog_f.{{ fact_sk }} IS DISTINCT FROM dimlog_m.dimlog_sk
{% elif facts_distributed %}
UPDATE {{ facts }} dimlog_f
SET {{ fact_sk }} = COALESCE({{ lookup("dimlog_f") }}, -1)
WHERE dimlog_f.{{ fact_sk }} IS DISTINCT FROM COALESCE({{ lookup("dimlog_f") }}, -1)
{% else %}
UPDATE {{ facts }} dimlog_f
SET {{ fact_sk }} = dimlog_m.dimlog_sk
FROM dimlog_assign_map dimlog_m
WHERE dimlog_f.ctid = dimlog_m.dimlog_rid::tid AND dimlog_f.{{ fact_sk }} IS DISTINCT FROM dimlog_m.dimlog_sk
{% endif %}
