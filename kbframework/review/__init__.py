"""What the admin reviews: the dashboard, answer feedback, questions that found nothing,
and whether the model providers answer."""
