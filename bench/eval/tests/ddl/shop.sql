-- DDL only: the harness plans predictions with EXPLAIN as the role and reports EX as null.
CREATE TABLE items (
    id integer PRIMARY KEY,
    name text NOT NULL,
    category text,
    price numeric(8, 2)
);
CREATE TABLE sales (
    item_id integer REFERENCES items (id),
    sold_on date,
    quantity integer
);
