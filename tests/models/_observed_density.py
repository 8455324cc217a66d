"""The data term of a NumPyro model: the log density of its observed sites."""

from numpyro import handlers


def observed_log_density(model, params, *args):
    """Sum of ``log_prob`` over the observed sample sites (factors included) of
    ``model(*args)`` with ``params`` substituted for its latent sites."""
    trace = handlers.trace(handlers.substitute(model, params)).get_trace(*args)
    return sum(
        site["fn"].log_prob(site["value"]).sum()
        for site in trace.values()
        if site["type"] == "sample" and site["is_observed"]
    )
