"""Helpers that more than one test module uses, so no test module imports another: each
module here is named after the code it helps test."""
