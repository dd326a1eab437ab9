"""What Airflow tasks call: stage runners with retry decisions, and the approval step."""
