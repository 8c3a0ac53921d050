"""The result comparison rules of compare.py, each on results built to pass or fail it."""

import os
import sys
import unittest
from decimal import Decimal

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import compare  # noqa: E402
import sqltext  # noqa: E402


def same(pred, gold, ordered=False):
    return compare.same_result(compare.rows(pred), compare.rows(gold), ordered)


class Rows(unittest.TestCase):
    def test_rows_are_a_multiset(self):
        self.assertTrue(same([(2,), (1,), (1,)], [(1,), (1,), (2,)]))
        self.assertFalse(same([(1,), (2,), (2,)], [(1,), (1,), (2,)]))  # same set, other counts
        self.assertFalse(same([(1,), (2,)], [(1,), (1,), (2,)]))        # a duplicate missing

    def test_order_counts_only_when_the_gold_orders(self):
        self.assertTrue(same([(2,), (1,)], [(1,), (2,)], ordered=False))
        self.assertFalse(same([(2,), (1,)], [(1,), (2,)], ordered=True))
        self.assertTrue(same([(1,), (2,)], [(1,), (2,)], ordered=True))

    def test_empty_results_match_whatever_their_columns(self):
        self.assertTrue(same([], []))
        self.assertFalse(same([], [(1,)]))
        self.assertFalse(same([(1,)], []))


class Columns(unittest.TestCase):
    def test_column_order_does_not_count(self):
        self.assertTrue(same([("a", 1), ("b", 2)], [(1, "a"), (2, "b")]))
        self.assertTrue(same([("b", 2), ("a", 1)], [(1, "a"), (2, "b")], ordered=False))

    def test_ordered_rows_under_a_column_permutation(self):
        self.assertTrue(same([(52, "Joe"), (43, "John")], [("Joe", 52), ("John", 43)], ordered=True))
        self.assertFalse(same([(43, "John"), (52, "Joe")], [("Joe", 52), ("John", 43)], ordered=True))

    def test_one_permutation_for_all_rows(self):
        # Each column of the prediction holds the gold's values of some column, but no
        # single permutation of the columns gives the gold's rows.
        self.assertFalse(same([(1, 1), (2, 2)], [(1, 2), (2, 1)]))
        self.assertFalse(same([("a", 2), ("b", 1)], [(1, "a"), (2, "b")]))

    def test_column_count(self):
        self.assertFalse(same([(1, "a")], [(1,)]))
        self.assertFalse(same([(1,)], [(1, 1)]))

    def test_duplicate_columns(self):
        self.assertTrue(same([(1, 1, "x")], [("x", 1, 1)]))
        self.assertFalse(same([(1, 1, "x")], [("x", 1, 2)]))


class Values(unittest.TestCase):
    def test_numbers_by_value_whatever_their_type(self):
        self.assertTrue(same([(Decimal("3.000"),)], [(3,)]))
        self.assertTrue(same([(3.0,)], [(3,)]))
        self.assertTrue(same([(Decimal("2.5"),)], [(2.5,)]))
        # numeric division against float arithmetic: the same value to 12 digits
        self.assertTrue(same([(Decimal("2.3333333333333333"),)], [(7 / 3,)]))
        self.assertFalse(same([(Decimal("2.33"),)], [(7 / 3,)]))
        self.assertFalse(same([(1.0,)], [(1.1,)]))

    def test_null_matches_null_only(self):
        self.assertTrue(same([(None, 1)], [(None, 1)]))
        self.assertFalse(same([(None,)], [(0,)]))
        self.assertFalse(same([(None,)], [("",)]))

    def test_text_exactly(self):
        self.assertFalse(same([("france",)], [("France",)]))
        self.assertFalse(same([("France ",)], [("France",)]))
        self.assertFalse(same([("1",)], [(1,)]))  # text is not a number
        self.assertTrue(same([("France",)], [("France",)]))

    def test_other_types(self):
        import datetime
        d = datetime.date(2020, 1, 2)
        self.assertTrue(same([(d,)], [(datetime.date(2020, 1, 2),)]))
        self.assertFalse(same([(d,)], [("2020-01-02",)]))
        self.assertTrue(same([([1, 2],)], [((1, 2),)]))


class GoldOrders(unittest.TestCase):
    def test_only_a_top_level_order_by_orders(self):
        self.assertTrue(sqltext.orders_at_top("SELECT a FROM t ORDER BY a DESC"))
        self.assertTrue(sqltext.orders_at_top("select a from t order\n by a"))
        self.assertFalse(sqltext.orders_at_top(
            "SELECT a FROM t WHERE b = (SELECT b FROM t ORDER BY c LIMIT 1)"))
        self.assertFalse(sqltext.orders_at_top("SELECT 'order by' FROM t"))
        self.assertFalse(sqltext.orders_at_top("SELECT \"order\" FROM t"))


if __name__ == "__main__":
    unittest.main()
