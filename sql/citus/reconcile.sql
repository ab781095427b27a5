{# PostgreSQL's `missing` and `unseen` take the staged keys away with NOT IN and EXCEPT,
   which Citus plans on the coordinator, pulling every key of the dimension or the
   source there; as anti-joins on the key they run on each shard (the stage is analysed
   on Citus, so the anti-join is hashed, see sql/citus/stage.sql). #}
-- statement: key_diff_by_merge
-- statement: key_diff_done
-- statement: key_diff
{# Not on this engine: its own `missing` and `unseen` below read the tables themselves. #}
-- statement: missing
CREATE TEMP TABLE dimlog_missing AS
SELECT {{ keys|cols("dimlog_d") }}, dimlog_d.valid_from
FROM {{ dim }} dimlog_d
WHERE dimlog_d.is_current
  AND NOT EXISTS (SELECT 1 FROM dimlog_source_keys dimlog_s WHERE {{ keys|eqs("dimlog_s", "dimlog_d") }}{% if deleted_flag %} AND dimlog_s.dimlog_live{% endif %})
  AND NOT EXISTS (SELECT 1 FROM dimlog_stage dimlog_g WHERE {{ keys|eqs("dimlog_g", "dimlog_d") }})
-- statement: unseen
CREATE TEMP TABLE dimlog_unseen AS
SELECT DISTINCT {{ keys|cols("dimlog_s") }}
FROM dimlog_source_keys dimlog_s
WHERE {% if deleted_flag %}dimlog_s.dimlog_live AND {% endif %}NOT EXISTS (SELECT 1 FROM {{ dim }} dimlog_d WHERE {{ keys|eqs("dimlog_d", "dimlog_s") }} AND dimlog_d.is_current)
  AND NOT EXISTS (SELECT 1 FROM dimlog_stage dimlog_g WHERE {{ keys|eqs("dimlog_g", "dimlog_s") }})
