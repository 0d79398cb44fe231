"""Invoices: monthly drafts, their lines, closing a month, voiding and redrafting, payments and
the PDF."""
