{# On Citus a materialized CTE is computed on the coordinator (a "distributed subplan"
   that pulls its rows there); inlined, each shard computes it for its own keys, which
   is all the statements reading it need (they join on the key). #}
{% macro reused() %}NOT MATERIALIZED{% endmacro %}
{% macro in_key_order() %}{% endmacro %}
