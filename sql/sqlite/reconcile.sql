{# Hard deletes: compare the source's full key list (keys only) with the dimension's
   live keys. Missing keys get a tombstone at the run's upper bound; the rare key whose
   newest version is not before it is stamped just after that version, in Rust. #}
-- statement: keys_table
CREATE TEMP TABLE dimlog_source_keys (
{% for c in key_defs %}
    {{ c.name }} {{ c.target_type }}{{ "," if not loop.last or deleted_flag }}
{% endfor %}
{% if deleted_flag %}
    dimlog_live BOOLEAN
{% endif %}
)
-- statement: key_diff_by_merge
-- statement: key_diff_done
-- statement: key_diff
{# Not on this engine: `missing` and `unseen` read the tables themselves, through the key index. #}
-- statement: key_index
CREATE INDEX temp.dimlog_source_keys_idx ON dimlog_source_keys ({{ keys|cols }})
{# Missing: current in the dimension, not live in the source (gone, or its row flagged
   deleted where no window reads it), and not in this load. The load's keys are an IN
   list, built once (keys are never NULL): a correlated NOT EXISTS scanned the unindexed
   stage once per missing key (minutes for 20k missing keys beside 100k changes). #}
-- statement: missing
CREATE TEMP TABLE dimlog_missing AS
SELECT {{ keys|cols("dimlog_d") }}, dimlog_d.valid_from
FROM {{ dim }} dimlog_d
WHERE dimlog_d.is_current
  AND NOT EXISTS (SELECT 1 FROM dimlog_source_keys dimlog_s WHERE {{ keys|eqs("dimlog_s", "dimlog_d") }}{% if deleted_flag %} AND dimlog_s.dimlog_live{% endif %})
  AND ({{ keys|cols("dimlog_d") }}) NOT IN (SELECT {{ keys|cols("dimlog_st") }} FROM dimlog_stage dimlog_st)
{# Source keys held live that are neither live in the dimension nor in this load:
   stamped behind every window (restored from a backup, or inserted with an old stamp).
   Their rows are read again and loaded; a deleted key among them is revived. The staged
   keys are taken away with EXCEPT, a set operation: an anti-join against the unanalysed
   stage was planned as a nested loop (13 s for 20k restored keys). #}
-- statement: unseen
CREATE TEMP TABLE dimlog_unseen AS
SELECT {{ keys|cols("dimlog_s") }}
FROM dimlog_source_keys dimlog_s
WHERE {% if deleted_flag %}dimlog_s.dimlog_live AND {% endif %}NOT EXISTS (SELECT 1 FROM {{ dim }} dimlog_d WHERE {{ keys|eqs("dimlog_d", "dimlog_s") }} AND dimlog_d.is_current)
EXCEPT
SELECT {{ keys|cols }} FROM dimlog_stage
-- statement: unseen_count
SELECT count(*) FROM dimlog_unseen
-- statement: missing_count
SELECT count(*) FROM dimlog_missing
{# Live keys, counted only as far as the mass-delete guard needs: past the limit the
   guard cannot trip, so a run closing a few keys does not count the whole dimension. #}
-- statement: live_count
SELECT count(*) FROM (SELECT 1 FROM {{ dim }} WHERE is_current LIMIT ?1) dimlog_live
-- statement: tombstones
INSERT INTO dimlog_stage ({{ keys|cols }}, valid_from, is_deleted)
SELECT {{ keys|cols }}, ?1, 1
FROM dimlog_missing
WHERE valid_from < ?1
-- statement: late_missing
SELECT {% for k in keys %}CAST({{ k }} AS TEXT), {% endfor %}valid_from FROM dimlog_missing WHERE valid_from >= ?1
-- statement: analyze
{# Not needed on this engine: SQLite's planner uses the key index of `key_index` instead. #}
{# A key whose soft-delete flag spells neither true nor false (its `dimlog_live` is NULL). #}
-- statement: flag_neither
SELECT {% for c in key_defs %}CAST({{ c.name }} AS TEXT){{ ", " if not loop.last }}{% endfor %}
FROM dimlog_source_keys WHERE dimlog_live IS NULL LIMIT 1
