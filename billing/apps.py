from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"

    def ready(self):
        # jobs/ is a lower layer: it learns of money through the registries it keeps, which
        # billing fills in here (a job's cost for its page and API; the budget hold and the credit limit at submit).
        from billing import costs, group_money, run_quotes
        from billing.actions import budgets, credit_limits
        from datasets.quota import register_quota_gate
        from jobs.costs import register_cost_provider, register_quote_provider
        from jobs.submission.checks import register_submission_check

        register_cost_provider(costs.job_costs)
        register_quote_provider(run_quotes.quote_runs)
        register_submission_check("billing.budget_hold", budgets.hold_at_limit_check)
        register_submission_check("billing.credit_limit", credit_limits.credit_limit_check)
        register_submission_check("billing.group_hold", group_money.group_hold_check)
        register_quota_gate("billing.credit_limit", credit_limits.dataset_quota_gate)
