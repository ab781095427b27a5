{# assign-keys on Citus. A fact table distributed by the key and colocated with the
   dimension is assigned in one UPDATE that Citus runs on the shards (a correlated lookup
   on the distribution column). A local fact table is joined with the distributed
   dimension first, into a map on the coordinator by row (`ctid`, which Citus does not
   let a statement that also reads a distributed table use), then updated from the map. #}
{% macro lookup(x) %}(SELECT dimlog_d.{{ sk }} FROM {{ dim }} dimlog_d
     WHERE {% for k in fact_keys %}dimlog_d.{{ key_names[loop.index0] }} = {{ x }}.{{ k }} AND {% endfor %}dimlog_d.valid_from <= {{ at(x ~ "." ~ fact_at) }} AND {{ at(x ~ "." ~ fact_at) }} < dimlog_d.valid_to){% endmacro %}
{# 0: a local fact table; 1: distributed by the first key column and colocated with the
   dimension (assigned on the shards); 2: distributed otherwise (by another column, in
   another colocation group, or a reference table), which no statement here can update
   from the dimension. A dimension distributed by its key's hash (a key of several
   columns) has no fact table colocated by the key: any distributed one is 2. #}
-- statement: facts_distributed
SELECT CASE
    WHEN NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass($1)) THEN '0'
    WHEN {{ "false AND " if key_hash }}EXISTS (SELECT 1 FROM pg_dist_partition dimlog_f
                 JOIN pg_dist_partition dimlog_d ON dimlog_d.logicalrelid = to_regclass({{ dim|lit }})
                 WHERE dimlog_f.logicalrelid = to_regclass($1) AND dimlog_f.colocationid = dimlog_d.colocationid
                   AND dimlog_f.partkey IS NOT NULL
                   AND column_to_column_name(dimlog_f.logicalrelid, dimlog_f.partkey) = {{ fact_keys[0]|bare|lit }}) THEN '1'
    ELSE '2'
END
-- statement: assign_map
{% if not facts_distributed %}
CREATE TEMP TABLE dimlog_assign_map ON COMMIT DROP AS
SELECT dimlog_x.dimlog_rid, COALESCE(dimlog_d.{{ sk }}, -1) AS dimlog_sk
FROM (SELECT ctid::text AS dimlog_rid, * FROM {{ facts }} OFFSET 0) dimlog_x
LEFT JOIN {{ dim }} dimlog_d
  ON {% for k in fact_keys %}dimlog_d.{{ key_names[loop.index0] }} = dimlog_x.{{ k }} AND {% endfor %}dimlog_d.valid_from <= {{ at("dimlog_x." ~ fact_at) }} AND {{ at("dimlog_x." ~ fact_at) }} < dimlog_d.valid_to
{% endif %}
-- statement: assign
{% if facts_distributed %}
UPDATE {{ facts }} dimlog_f
SET {{ fact_sk }} = COALESCE({{ lookup("dimlog_f") }}, -1)
WHERE dimlog_f.{{ fact_sk }} IS DISTINCT FROM COALESCE({{ lookup("dimlog_f") }}, -1)
{% else %}
UPDATE {{ facts }} dimlog_f
SET {{ fact_sk }} = dimlog_m.dimlog_sk
FROM dimlog_assign_map dimlog_m
WHERE dimlog_f.ctid = dimlog_m.dimlog_rid::tid AND dimlog_f.{{ fact_sk }} IS DISTINCT FROM dimlog_m.dimlog_sk
{% endif %}
