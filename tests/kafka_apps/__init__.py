"""Kafka client programs written as third-party code is, which the tests run under the doubles."""
