"""`field__any_of=[...]`: membership in a long list of values as one parameter.

`field__in=[5,000 ids]` makes Django build, and psycopg convert, a statement with 5,000
placeholders: at 5,000 queued jobs that was most of the mirror's quiet pass
(~0.4 s of Python per query, bench/mirror_passes.py). On PostgreSQL this is `field = ANY(%s)` with the list bound as
one array; elsewhere (SQLite, the zero-setup default) it is the plain IN list."""

from django.db.models import IntegerField, Lookup


class AnyOf(Lookup):
    lookup_name = "any_of"
    prepare_rhs = False  # a list of values, bound whole

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        values = [int(value) for value in self.rhs]
        if connection.vendor == "postgresql":
            return f"{lhs} = ANY(%s::bigint[])", [*lhs_params, values]
        if not values:
            return "1 = 0", list(lhs_params)
        return f"{lhs} IN ({', '.join(['%s'] * len(values))})", [*lhs_params, *values]


# Inherited by BigIntegerField and the auto fields (lookups follow the class hierarchy).
IntegerField.register_lookup(AnyOf)
