"""Log densities read off a NumPyro model's trace: the data term (its observed
sites) and one latent site's prior."""

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


def site_log_prior(model, params, name, *args):
    """``log_prob`` of the latent site ``name``'s prior at its value in ``params``
    (summed over the site's entries), from ``model(*args)``'s trace."""
    trace = handlers.trace(handlers.substitute(model, params)).get_trace(*args)
    site = trace[name]
    return float(site["fn"].log_prob(site["value"]).sum())
