-- TPC-H Q13: customer distribution (validation parameters: WORD1 = special, WORD2 = requests)
-- The spec names the derived table's columns in a list, `as c_orders (c_custkey, c_count)`;
-- here they are named by aliases in its select list instead (same query).
select
    c_count,
    count(*) as custdist
from
    (
        select
            c_custkey,
            count(o_orderkey) as c_count
        from
            customer left outer join orders on
                c_custkey = o_custkey
                and o_comment not like '%special%requests%'
        group by
            c_custkey
    ) as c_orders
group by
    c_count
order by
    custdist desc,
    c_count desc
