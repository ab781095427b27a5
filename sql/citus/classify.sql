{# On Citus a materialized CTE is computed on the coordinator (a "distributed subplan"
   that pulls its rows there); inlined, each shard computes it for its own keys, which
   is all the statements reading it need (they join on the key). #}
{% macro reused() %}NOT MATERIALIZED{% endmacro %}
{% macro in_key_order() %}{% endmacro %}
{# Each shard joins its own log rows to its own staged keys. #}
{% macro of_staged_keys() %}
JOIN (SELECT DISTINCT {{ keys|cols }} FROM dimlog_stage) dimlog_t ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
WHERE
{% endmacro %}
{# Not on Citus: the statement probes per staged row through a correlated subquery with
   a LIMIT and deletes by `ctid`, neither of which Citus pushes down to its shards; each
   shard joins its own history instead. #}
-- statement: drop_unchanged
